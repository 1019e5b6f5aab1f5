"""Pure parsers of command outputs. Each takes the text a command printed and returns plain,
JSON-serialisable values; unknown stays None (never 0), so checks can tell 'unknown' from 'bad'."""
