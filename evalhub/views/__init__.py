"""Pages for release managers: thin views over services and selectors."""
