//! Corpus loading, chunkings, replay, invariants and minimization: formats only via the registry.
