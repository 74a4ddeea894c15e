"""Group travel planning: members, preference synthesis, social-choice strategies, vote, feedback, planner and plan writer."""
