"""Relax -> Relax rewrites that run before legalisation, so that fusion and the rules see better graphs."""
