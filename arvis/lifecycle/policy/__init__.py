"""Policy (DESIGN §2): the rules engine and Cedar, shadow evaluation, budgets."""
