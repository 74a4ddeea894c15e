"""The movie catalog (project catalog and the OpenDialKG KB), the concept extractor and the catalog build script."""
