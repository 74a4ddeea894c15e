"""Group travel planning metrics M1-M16 and welfare W1-W3, the dialogue CSV format and figures."""
