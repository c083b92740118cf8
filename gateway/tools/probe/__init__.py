"""Cross-tenant isolation probes: one catalogue for the test suite and for `kbgate probe`.

A campaign provisions its own throwaway world on a gateway — two organizations, two
workspaces each, knowledge bases in the org collections and in `kb_shared` with the
*same* KB and document ids in every workspace, documents of every classification, each
carrying a unique canary token in its text and title — and then, as every principal
(keys of each role and clearance, the platform key, no key at all), tries to get every
other workspace's canaries back through every endpoint. It runs in phases: strict
isolation on, off, toggled mid-run, KBs moved between agents, documents rewritten and
deleted, KBs mid-migration to another embedding model (a second vector set beside the
first, one KB answering from it). Every probe is data: endpoint x principal x mode, with
the status it must get, the markers it may see, and a check of the body.

The invariant checked on every response: its raw text carries no canary the caller may
not see (another workspace's, one above the key's clearance, a legacy point under strict
isolation, one in a KB the agent does not search, a deleted one), no other workspace's
tenant id, key id or KB/agent id, no other organization's id, and no key at all; counts
(stats, document lists, grounding matches, settings history, KB and agent changes) equal
exactly the caller's own. Positive controls (the caller's own documents come back) keep a
probe from passing because nothing works at all.

The test suite (`tests/isolation`) drives a campaign through the in-process app, adds
legacy points (written without `orgId`, which the HTTP API cannot do) and scans the
captured logs too; `kbgate probe --url URL --platform-key KEY` drives the same campaign
over HTTP against any deployment. The campaign touches only what it created (ids
prefixed `probe-<random>`): when done it deletes its documents (a probe of that endpoint),
then its organizations (`DELETE /v1/orgs/{org_id}`, and with them every workspace, KB,
agent, key, turn record, settings history and collection it planted), checks that its
keys answer 401, and reports what it removed and anything left behind.
"""
