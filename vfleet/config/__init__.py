"""Configuration: the variable table, HostConfig (every default and derived value, typed),
the fleet model (serving hosts and replicas), the vLLM/CUDA/driver facts table, monitoring
settings and the quoting filters. Imports the engine only; every role reads its values from here."""
