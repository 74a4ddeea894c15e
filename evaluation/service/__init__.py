"""The customer-service metrics at turn, dialogue and dataset level."""
