"""Real-process fault injection that proves ../shared/SCENARIOS.md. Not yet built (issue 7)."""
