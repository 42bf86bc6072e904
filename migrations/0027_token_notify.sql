-- Token revocation reaches every API replica's token cache (api/auth.c):
-- revoking or deleting a token notifies 'trainyard_tokens' with its id in
-- the same transaction, whoever does it (the API, an operator's SQL), and
-- each replica LISTENs and drops the cached entry. The id, not the hash:
-- any session of the database may LISTEN.
CREATE FUNCTION ty_token_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('trainyard_tokens', OLD.id::text);
	RETURN NULL;
END
$$;

CREATE TRIGGER api_tokens_notify
	AFTER UPDATE OR DELETE ON api_tokens
	FOR EACH ROW EXECUTE FUNCTION ty_token_notify();
