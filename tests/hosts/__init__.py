"""Host adapter tests: one behavioural contract, three adapters."""
