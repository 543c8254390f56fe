"""The artifact cache: content-addressed artifacts and the records that let a rebuild skip work."""
