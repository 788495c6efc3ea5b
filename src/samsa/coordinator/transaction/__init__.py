"""The transaction coordinator: transactional ids, their producers and transactions in
``__transaction_state``."""
