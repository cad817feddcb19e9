"""Accounts' REST API: signing in, tokens, users and groups (v2, OpenPAI's older user paths, and
the v1 paths openpaisdk calls)."""
