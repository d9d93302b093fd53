"""The follow-up detector: is the next user turn a follow-up, a deepening question or something new?"""
