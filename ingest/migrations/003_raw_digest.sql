-- The SHA-256 of a delivery's body ('sha256:' and hex), so that another
-- delivery with its key and another body is told from a redelivery and
-- logged; NULL for a delivery without a body (a manual trigger) and for
-- the records made before. A nullable column is added without rewriting
-- the table.
ALTER TABLE webhook_deliveries ADD COLUMN raw_digest text;
