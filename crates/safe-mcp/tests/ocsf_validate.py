"""Validates OCSF events (one JSON object per line on stdin) against the OCSF schema of the
version each names, as the registry package ocsf-json-schema (PyPI) generates it, with the
jsonschema package. Prints each event's class and any error; exits 1 if any event fails."""
import json
import sys

import jsonschema
from ocsf_json_schema import OcsfJsonSchemaEmbedded, get_ocsf_schema

schemas = {}
failed = 0
for n, line in enumerate(sys.stdin, 1):
    event = json.loads(line)
    version = event["metadata"]["version"]
    if version not in schemas:
        schemas[version] = OcsfJsonSchemaEmbedded(get_ocsf_schema(version=version))
    ocsf = schemas[version]
    name = ocsf.lookup_class_name_from_uid(class_uid=event["class_uid"])
    schema = ocsf.get_class_schema(class_name=name, profiles=[])
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(event))
    print(f"{n} {name} {len(errors)}")
    for e in errors:
        failed += 1
        print(f"  {list(e.absolute_path)}: {e.message}")
sys.exit(1 if failed else 0)
