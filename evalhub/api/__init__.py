"""The REST API (DRF): thin views over the services and selectors of every floor."""
