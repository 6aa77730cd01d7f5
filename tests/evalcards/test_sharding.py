"""jaxpapers.evalcards takes no device arrays: every public function is exempt.

Evaluation Cards read and write JSON run records on the host (json,
jsonschema, statistics); nothing here is traced or placed on a mesh.
"""

_HOST_JSON = "host-side Python over JSON run records, no device arrays"

NOT_SHARDED = {
    "evalcards.analyze": _HOST_JSON,
    "evalcards.badges": "host-side wording of a card summary dict, no arrays",
    "evalcards.comparability": _HOST_JSON + " (a group's Rows)",
    "evalcards.completeness": "host-side scoring of a benchmark-card dict",
    "evalcards.divergence_threshold": "host-side float from a metric_config"
                                      " dict",
    "evalcards.load_directory": "host-side file reading and jsonschema"
                                " validation",
    "evalcards.normalize_organization": "host-side string normalisation of a"
                                        " name",
    "evalcards.provenance": _HOST_JSON + " (a group's Rows)",
    "evalcards.record_errors": "host-side jsonschema validation of a JSON"
                               " record",
    "evalcards.reproducibility": _HOST_JSON + " (one Row)",
    "evalcards.result_entry": "host-side construction of a JSON result dict"
                              " from Python floats",
    "evalcards.rows": _HOST_JSON,
    "evalcards.run_record": "host-side construction of a validated JSON"
                            " record",
    "evalcards.summary": "host-side counts over an analysis dict",
    "evalcards.validate_record": "host-side jsonschema validation of a JSON"
                                 " record",
}

CASES = {}
