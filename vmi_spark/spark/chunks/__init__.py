"""Chunks of encoded rows: how they are coded and decoded, where they are kept
between passes, and the memory budgets that size them."""
