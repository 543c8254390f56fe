"""TFLite flatbuffer -> Relax: TVM's importer with the fixes each operator needs."""
