"""The students: the architectures behind one interface (architectures: BERT-family, the BiLSTM of bilstm, the
static-embedding student of static_embedding, both saved by own_student), checkpoints loaded by name or path (models), a
stage's saved model (stage_folder), a cut student's shape (student_shape), the export wrapper (export_wrapper), batched
logits on every runtime with the runtimes' loaders (inference), what a fitted student was fitted with
(fitted_vocabulary), how often each word piece occurs in a recipe's text (piece_counts). It may import the wings below
it (config/, run/, tasks/, process/) and core's ground."""
