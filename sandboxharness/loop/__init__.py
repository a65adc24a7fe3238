"""The optimization loop: campaigns, rounds, task bundles and promotion evidence."""
