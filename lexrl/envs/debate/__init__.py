"""Multi-agent legal debate (the MAD_legal technical report, "Multi-Agent Debate for Brazilian
Legal Reasoning" (2024))."""
