"""Support for the test suite only: never named by the production settings."""
