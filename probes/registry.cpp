// The one table of probes (filled in by the registry work).
