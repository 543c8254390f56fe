"""TIR schedule rules: each recognises a kind of fused kernel and schedules it (first fit wins)."""
