"""MetaSchedule tuning, the alternative to the default schedules, and the race that keeps the faster."""
