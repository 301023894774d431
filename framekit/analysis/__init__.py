"""Reading scored frames: agreement with people, calibrated thresholds, pass/fail gates."""
