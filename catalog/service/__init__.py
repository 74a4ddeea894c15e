"""Customer-service data: the MultiWOZ-style databases and schema, MultiWOZ dialogues, value normalisation."""
