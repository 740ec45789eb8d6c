"""Ready stacks: compose efa_constructs into deployable clusters."""
