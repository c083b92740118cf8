"""The engine adapters of the Index port (`ingest.index`), one folder each."""
