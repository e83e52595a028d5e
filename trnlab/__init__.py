"""trnlab."""
