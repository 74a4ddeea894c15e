"""The multi-agent customer-service system on MultiWOZ domains: triage, memory, policy, action, supervisor, response, the user simulator and the judge."""
