"""`vfleet usage`: the gateways' JSON access logs read over SSH for a time window and summarised
per tenant and model. window (the --since/--until flags), logread (the fact that reads one
gateway's log and its rotated copies, bounded), summary (lines to rows), collect (every
gateway in one play)."""
