"""Per-KB calibration: a golden set run through the retrieval turn, its figures and a
recommendation of the KB's floors, fusion weights and grounding floor.

`measure` runs each question through the turn's own steps (plan, legs, ranking in the
KB's Scope, fusion) under candidate settings; `recommend` turns the measurements into
settings (the one place that knows which KB settings are floors); `grounding_floor`
scores answers with the real grounding check; `runner` runs an evaluation in the
background on the expensive-work pool and records its progress in the store.
"""
