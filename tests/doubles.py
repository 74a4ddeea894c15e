"""Test doubles shared by several test files."""


class ScriptedModel:
    """A chat-model double answering a fixed string; records the system prompts it was given."""
    is_none = False

    def __init__(self, answer):
        self.answer, self.prompts = answer, []

    def invoke(self, messages, purpose="generate"):
        self.prompts.append(messages[0][1])
        return self.answer
