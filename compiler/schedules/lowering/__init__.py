"""Passes of the CPU compile pipeline after scheduling: what the rules marked, carried out on the TIR."""
