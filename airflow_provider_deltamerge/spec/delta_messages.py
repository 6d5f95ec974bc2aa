"""Delta Lake's MERGE error classes and message texts, kept in one table so every layer words errors alike.

Texts are Delta's own (delta-error-classes.json, or the Spark/Delta source where Delta raises a bare
exception); ``<name>`` placeholders are filled by ``delta_message``. Classes starting ``DELTAMERGE_`` are this
provider's: they name checks Delta leaves to Spark's SQL parser, which has no class of its own for them.
"""

from __future__ import annotations

import re

DELTA_MESSAGES: dict[str, str] = {
    "DELTA_MERGE_MISSING_WHEN": "There must be at least one WHEN clause in a MERGE statement.",
    "DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION": (
        "When there are more than one MATCHED clauses in a MERGE statement, only the last MATCHED clause "
        "can omit the condition."
    ),
    "DELTA_NON_LAST_NOT_MATCHED_CLAUSE_OMIT_CONDITION": (
        "When there are more than one NOT MATCHED clauses in a MERGE statement, only the last NOT MATCHED "
        "clause can omit the condition"
    ),
    "DELTA_NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION": (
        "When there are more than one NOT MATCHED BY SOURCE clauses in a MERGE statement, only the last "
        "NOT MATCHED BY SOURCE clause can omit the condition."
    ),
    # Spark's parser classes for the same rules in MERGE INTO text (error-conditions.json of Spark 4.2).
    "MERGE_WITHOUT_WHEN": "There must be at least one WHEN clause in a MERGE statement.",
    "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION": (
        "When there are more than one MATCHED clauses in a MERGE statement, only the last MATCHED clause "
        "can omit the condition."
    ),
    "NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION": (
        "When there are more than one NOT MATCHED [BY TARGET] clauses in a MERGE statement, only the last "
        "NOT MATCHED [BY TARGET] clause can omit the condition."
    ),
    "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION": (
        "When there are more than one NOT MATCHED BY SOURCE clauses in a MERGE statement, only the last "
        "NOT MATCHED BY SOURCE clause can omit the condition."
    ),
    "DELTA_MERGE_UNRESOLVED_EXPRESSION": "Cannot resolve <sqlExpr> in <clause> given columns <cols>.",
    "AMBIGUOUS_REFERENCE": "Reference <name> is ambiguous, could be: <referenceNames>.",
    # DeltaAnalysis raises this one as a bare IllegalArgumentException, so it has no Delta error class.
    "DELTAMERGE_INVALID_CLAUSE_ACTION": (
        "<action> clauses cannot be part of the <group> clause in MERGE INTO."
    ),
    "DELTA_CONFLICT_SET_COLUMN": "There is a conflict from these SET columns: <columnList>.",
    "DELTA_DUPLICATE_COLUMNS_ON_INSERT": "Duplicate column names in INSERT clause",
    "DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION": (
        "Nested field is not supported in the <operation> (field = <fieldName>)."
    ),
    "DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT": (
        "Updating nested fields is only supported for StructType, but you are trying to update a field of "
        "<columnName>, which is of type: <dataType>."
    ),
    "FIELD_NOT_FOUND": "No such struct field <fieldName> in <fields>.",
    "INVALID_EXTRACT_BASE_FIELD_TYPE": (
        "Can't extract a value from <base>. Need a complex type [STRUCT, ARRAY, MAP] but got <other>."
    ),
    "DELTAMERGE_EMPTY_ASSIGNMENTS": "<action> needs at least one column.",
    "DELTAMERGE_EXCEPT_WITHOUT_STAR": "EXCEPT (<columns>) is only allowed after *.",
    "DELTAMERGE_STAR_WITH_ASSIGNMENTS": "A clause is either <action> * or lists its columns, not both.",
    "DELTAMERGE_BLANK_CONDITION": "The <part> is blank.",
    "DELTAMERGE_INVALID_COLUMN_NAME": "<name> is not a column name.",
    "DELTAMERGE_INVALID_ALIAS": "<name> is not a valid alias.",
    "DELTAMERGE_SAME_ALIAS": "The target and the source both have the alias <alias>.",
    "DELTAMERGE_INVALID_DEDUPLICATION": "Source de-duplication needs <missing>.",
    "DELTAMERGE_REFLECTION_REFUSED": "The function <function> calls Java methods and is refused in a merge.",
    "MERGE_INSERT_VALUE_COUNT_MISMATCH": (
        "The number of provided values (<actualCount>) must match the number of expected columns "
        "(<expectedCount>) in the INSERT clause of MERGE."
    ),
    "PARSE_SYNTAX_ERROR": "Syntax error at or near <error>.",
    "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE": (
        "Cannot perform Merge as multiple source rows matched and attempted to modify the same target row "
        "in the Delta table in possibly conflicting ways. By SQL semantics of Merge, when multiple source "
        "rows match on the same target row, the result may be ambiguous as it is unclear which source row "
        "should be used to update or delete the matching target row. You can preprocess the source table "
        "to eliminate the possibility of multiple matches. Please refer to "
        "https://docs.delta.io/latest/delta-update.html#upsert-into-a-table-using-merge"
    ),
    "DELTA_NUM_RECORDS_MISMATCH": (
        "Failed to validate the number of records in <operation>. Added <numAddedRecords> records and "
        "removed <numRemovedRecords> records. This is a bug."
    ),
    "DELTA_TABLE_NOT_FOUND": "Delta table <tableName> doesn't exist.",
    "DELTA_FILE_NOT_FOUND": "File path <path>",
    "DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED": "UPDATE on IDENTITY column <colName> is not supported.",
    "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED": (
        "Providing values for GENERATED ALWAYS AS IDENTITY column <colName> is not supported."
    ),
    "DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH": (
        "Deletion vector integrity check failed. Encountered a cardinality mismatch."
    ),
    "DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH": (
        "Could not verify deletion vector integrity, CRC checksum verification failed."
    ),
    "DELTA_DELETION_VECTOR_SIZE_MISMATCH": (
        "Deletion vector integrity check failed. Encountered a size mismatch."
    ),
    "DELTA_DELETION_VECTOR_INVALID_ROW_INDEX": (
        "Deletion vector integrity check failed. Encountered an invalid row index."
    ),
    "PATH_NOT_FOUND": "Path does not exist: <path>.",
}

_PLACEHOLDER = re.compile(r"<(\w+)>")


def delta_message(error_class: str, **params: object) -> str:
    """Delta's message for ``error_class`` with its ``<placeholders>`` filled from ``params``."""
    template = DELTA_MESSAGES[error_class]
    return _PLACEHOLDER.sub(lambda m: str(params.get(m.group(1), m.group(0))), template)
