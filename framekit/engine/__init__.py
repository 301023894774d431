"""The machinery behind ``evaluate_dataframe``: cache, rate limiter, executor and planner."""
