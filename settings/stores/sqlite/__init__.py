"""The embedded SettingsStore: one SQLite file in the data dir (`store.SqliteStore`)."""
