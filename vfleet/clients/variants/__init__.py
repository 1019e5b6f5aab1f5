"""`vfleet eval.variants`: model variants (bf16, AWQ, GPTQ, FP8 ...) of one model, or hosts,
compared on what they cost and what they answer, in one table, one PNG and one verdict line
each.

Why one command: the field report's exercise (quantized variants must be compared on memory,
speed AND a quality score, with at most a 3% score drop accepted) otherwise means reading four
bench results and four eval reports side by side. The inputs are the files `vfleet bench` and
`vfleet eval` already write; nothing here talks to a server.

inputs.py reads and checks them (one row a variant), judge.py gives the verdicts, the table and
the JSON, plot.py draws the PNG."""
