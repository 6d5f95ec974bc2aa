"""Resolution: clauses against the real schemas, casts to the target's types, nested fields,
schema evolution, catalog targets."""
