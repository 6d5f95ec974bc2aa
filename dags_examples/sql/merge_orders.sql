-- Apply the day's extract of orders: cancelled orders (negative amount) leave the table,
-- known orders take the extract's values, new orders are added.
MERGE INTO delta.`{{ params.lake }}/orders` AS t
USING parquet.`{{ params.lake }}/staging/orders/{{ ds }}.parquet` AS s
ON t.order_id = s.order_id
WHEN MATCHED AND s.amount < 0 THEN DELETE
WHEN MATCHED THEN UPDATE SET *
WHEN NOT MATCHED AND s.amount >= 0 THEN INSERT *
