"""The deployed SettingsStore: Redis, shared by every replica (`store.RedisStore`)."""
