"""The virtual clusters', storages' and nodes' REST API (v2, and the v1 paths openpaisdk calls)."""
