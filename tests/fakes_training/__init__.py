"""HTTP-level fakes of hosted training services (Tinker, Fireworks) for backend tests."""
