# stand-in for the repository file: only its name matters to the checks
