"""The SettingsStore port's adapters (`settings.store`): SQLite embedded, Redis deployed."""
